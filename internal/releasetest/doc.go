// Package releasetest proves that stormguard's modules can be installed by
// someone outside this repository, at a release version, with nothing but a
// module proxy.
//
// BuildProxy writes a file-system module proxy (the .info, .mod and .zip
// files of every module of versions.yaml, made with golang.org/x/mod/zip)
// from the working tree. The tests then install cmd/stormsim from it and
// build a scratch program against the library modules, with a fresh module
// cache, GOWORK=off and no sum database, serving third-party modules from
// the local module cache, so the whole check runs offline. They also check
// the module layout (no replace directives, sibling requires at the release
// version, versions.yaml and go.work in step) and run scripts/release.sh in
// a temporary clone.
//
// It is a module of its own so that the root module keeps importing only
// the standard library; it is never released.
package releasetest
