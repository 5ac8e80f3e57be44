package layer

// MeshSource says whether the service mesh in front of a server (Envoy,
// or a mesh built on it) retries the requests it forwards.
// WithMeshRetriesFrom asks it at every request that came through the
// mesh; config's *Handle implements it from a policy's
// nested.mesh_retries, so the declaration follows a reloaded policy file.
// MeshRetries must be safe for concurrent use and should be cheap (an
// atomic load): it runs on the request path.
type MeshSource interface {
	// MeshRetries reports whether the mesh retries the requests it
	// forwards, under the declaration in force now: true makes every
	// request carrying x-envoy-attempt-count count as coming from a
	// caller that retries (see WithMeshRetries).
	MeshRetries() bool
}

// WithMeshRetries declares whether the service mesh in front of this
// server retries requests (default false). Envoy sends
// x-envoy-attempt-count whenever include_request_attempt_count is on,
// which meshes turn on by default whether or not a retry policy is set,
// so the header alone proves only that the request came through the mesh:
//
//   - a count above 1 shows that the mesh has retried the request, so it
//     is the layer that retries (when Stormguard-Attempt is absent, the
//     count is the attempt number, and an attempt above 1 always marks a
//     caller that retries);
//   - a count of 1 says nothing about retries — unless the mesh is
//     declared to retry, in which case every request that carries
//     x-envoy-attempt-count comes from a caller that retries, whatever
//     Stormguard-Will-Retry says (the mesh retries on its own).
//
// A request without x-envoy-attempt-count is read from its other headers
// alone. Without the declaration, a tier behind a mesh that does retry
// retries as well, and the chain multiplies the mesh's attempts; with it,
// behind a mesh that does not retry, nothing retries a first attempt's
// failure. Declare what the mesh's route configuration says.
func WithMeshRetries(on bool) Option {
	return func(o *options) { o.mesh, o.meshSrc = on, nil }
}

// WithMeshRetriesFrom is WithMeshRetries with the declaration read from
// src at every request that carries x-envoy-attempt-count, so that it
// follows a reloaded policy file (config's *Handle is a MeshSource). A nil
// src declares that the mesh does not retry.
func WithMeshRetriesFrom(src MeshSource) Option {
	return func(o *options) { o.mesh, o.meshSrc = false, src }
}

// meshRetries reports whether the mesh is declared to retry.
func (o *options) meshRetries() bool {
	if o.meshSrc != nil {
		return o.meshSrc.MeshRetries()
	}
	return o.mesh
}
