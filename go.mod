module github.com/stormguard/stormguard

go 1.26

require (
	go.uber.org/goleak v1.3.0
	pgregory.net/rapid v1.3.0
)

require github.com/anishathalye/porcupine v1.3.1
