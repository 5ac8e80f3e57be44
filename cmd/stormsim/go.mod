module github.com/stormguard/stormguard/cmd/stormsim

go 1.26

require (
	github.com/stormguard/stormguard v0.3.0
	go.uber.org/goleak v1.3.0
	go.yaml.in/yaml/v3 v3.0.6
	gonum.org/v1/plot v0.17.0
)

require (
	github.com/fsnotify/fsnotify v1.10.1 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

require (
	codeberg.org/go-fonts/liberation v0.5.0 // indirect
	codeberg.org/go-latex/latex v0.2.0 // indirect
	codeberg.org/go-pdf/fpdf v0.11.1 // indirect
	git.sr.ht/~sbinet/gg v0.7.0 // indirect
	github.com/ajstarks/svgo v0.0.0-20211024235047-1546f124cd8b // indirect
	github.com/golang/freetype v0.0.0-20170609003504-e2365dfdc4a0 // indirect
	github.com/stormguard/stormguard/config v0.3.0 // indirect
	github.com/stormguard/stormguard/simtest v0.3.0
	golang.org/x/image v0.30.0 // indirect
	golang.org/x/text v0.42.0 // indirect
)
