module github.com/stormguard/stormguard/simtest

go 1.26

require (
	github.com/stormguard/stormguard v0.3.0
	github.com/stormguard/stormguard/config v0.3.0
	go.yaml.in/yaml/v3 v3.0.6
)

require (
	github.com/fsnotify/fsnotify v1.10.1 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
