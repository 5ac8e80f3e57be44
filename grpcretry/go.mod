module github.com/stormguard/stormguard/grpcretry

go 1.26

require github.com/stormguard/stormguard v0.0.0

replace github.com/stormguard/stormguard => ..
