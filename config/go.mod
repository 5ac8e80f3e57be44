module github.com/stormguard/stormguard/config

go 1.26

require (
	github.com/fsnotify/fsnotify v1.10.1
	github.com/stormguard/stormguard v0.3.0
	go.uber.org/goleak v1.3.0
	go.yaml.in/yaml/v3 v3.0.6
)

require golang.org/x/sys v0.48.0 // indirect
