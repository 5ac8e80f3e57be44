// Package docs holds the compiled examples behind the repository's guides
// (migrating.md): every Go block in them is an Example here, run by
// `make test`, so the guides cannot drift from the code.
package docs
