module github.com/stormguard/stormguard/internal/releasetest

go 1.26.0

require golang.org/x/mod v0.41.0
