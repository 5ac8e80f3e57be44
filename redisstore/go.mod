module github.com/stormguard/stormguard/redisstore

go 1.26.0

require (
	github.com/redis/go-redis/v9 v9.23.0
	github.com/stormguard/stormguard v0.3.0
	github.com/stormguard/stormguard/config v0.3.0
	go.uber.org/goleak v1.3.0
	pgregory.net/rapid v1.3.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/fsnotify/fsnotify v1.10.1 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
