module github.com/stormguard/stormguard/cmd/faultproxy

go 1.26

require (
	github.com/stormguard/stormguard v0.3.0
	go.uber.org/goleak v1.3.0
	go.yaml.in/yaml/v3 v3.0.6
)
