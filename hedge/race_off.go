//go:build !race

package hedge

const raceBuild = false
