// Package adaptertest holds no code: its tests check, in a module of their
// own (so config does not depend on client_golang or OpenTelemetry), that a
// config.Registry wired to the promretry and otelretry adapters — alone or
// combined with retry.Multi — exports reloads, budgets and breakers under
// the labels the call metrics use.
package adaptertest
