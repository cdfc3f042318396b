package api

import (
	"net/http"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/actors/device"
)

// defaultDeviceRegistry is the registry of the compatibility paths /attest/*.
const defaultDeviceRegistry = "default"

// registerDevices adds the device attestation registry endpoints (API.md "Device attestation
// registry"): one actor of kind device.KindName per registry name. Requests are validated
// here, so that a malformed one never reaches the actor (which validates again).
func (s *Server) registerDevices(mux *http.ServeMux) {
	named := func(h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { h(w, r, r.PathValue("registry")) }
	}
	compat := func(h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { h(w, r, defaultDeviceRegistry) }
	}
	mux.HandleFunc("POST /v1/attest/{registry}/register", named(s.registerDevice))
	mux.HandleFunc("POST /v1/attest/{registry}/challenge", named(s.challengeDevice))
	mux.HandleFunc("POST /v1/attest/{registry}/verify", named(s.verifyDevice))
	mux.HandleFunc("GET /v1/attest/{registry}/devices/{device_id}", s.getDevice)
	mux.HandleFunc("DELETE /v1/attest/{registry}/devices/{device_id}", Admin(s.Config.AdminToken, s.deleteDevice))
	mux.HandleFunc("POST /attest/register", compat(s.registerDevice))
	mux.HandleFunc("POST /attest/challenge", compat(s.challengeDevice))
	mux.HandleFunc("POST /attest/verify", compat(s.verifyDevice))
}

// deviceRegistered is the reply of a registration: 201 when new, 200 for a re-registration.
type deviceRegistered struct {
	DeviceID     string `json:"device_id"`
	RegisteredAt int64  `json:"registered_at"`
	LastSeen     int64  `json:"last_seen"`
}

func (s *Server) registerDevice(w http.ResponseWriter, r *http.Request, registry string) {
	var body device.Registration
	if !decodeDeviceBody(w, r, registry, &body) {
		return
	}
	var out device.Registered
	if err := s.callDevice(r, registry, device.MethodRegister, body, &out); err != nil {
		WriteError(w, err)
		return
	}
	status := http.StatusOK
	if out.Created {
		status = http.StatusCreated
	}
	WriteJSON(w, status, deviceRegistered{DeviceID: out.DeviceID, RegisteredAt: out.RegisteredAt, LastSeen: out.LastSeen})
}

func (s *Server) challengeDevice(w http.ResponseWriter, r *http.Request, registry string) {
	var body device.ChallengeRequest
	if !decodeDeviceBody(w, r, registry, &body) {
		return
	}
	out, err := s.callDeviceRaw(r, registry, device.MethodChallenge, body)
	if err != nil {
		WriteError(w, err)
		return
	}
	WriteRawJSON(w, http.StatusOK, out) // device.Challenge
}

func (s *Server) verifyDevice(w http.ResponseWriter, r *http.Request, registry string) {
	var body device.Verification
	if !decodeDeviceBody(w, r, registry, &body) {
		return
	}
	out, err := s.callDeviceRaw(r, registry, device.MethodVerify, body)
	if err != nil {
		WriteError(w, err)
		return
	}
	WriteRawJSON(w, http.StatusOK, out) // device.Verified
}

func (s *Server) getDevice(w http.ResponseWriter, r *http.Request) {
	registry, ref, ok := deviceInPath(w, r)
	if !ok {
		return
	}
	out, err := s.callDeviceRaw(r, registry, device.MethodGet, ref)
	if err != nil {
		WriteError(w, err)
		return
	}
	WriteRawJSON(w, http.StatusOK, out) // device.Device
}

func (s *Server) deleteDevice(w http.ResponseWriter, r *http.Request) {
	registry, ref, ok := deviceInPath(w, r)
	if !ok {
		return
	}
	if err := s.callDevice(r, registry, device.MethodDelete, ref, nil); err != nil {
		WriteError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// callDevice sends one request to the registry's actor with the request deadline.
func (s *Server) callDevice(r *http.Request, registry, method string, in, out any) error {
	return CallJSON(r.Context(), s.Caller, s.Config.RequestTimeout, device.KindName, registry, method, in, out)
}

// callDeviceRaw is callDevice for a reply written out as it stands.
func (s *Server) callDeviceRaw(r *http.Request, registry, method string, in any) ([]byte, error) {
	return CallRaw(r.Context(), s.Caller, s.Config.RequestTimeout, device.KindName, registry, method, in)
}

// decodeDeviceBody checks the registry name (400 invalid_id), decodes the body into dst
// (413 body_too_large, 400 invalid_request) and validates it. On failure it writes the error
// and returns false.
func decodeDeviceBody[T interface{ Validate() *actors.Error }](w http.ResponseWriter, r *http.Request, registry string, dst *T) bool {
	if !ValidName(registry) {
		WriteAPIError(w, InvalidID("registry", registry))
		return false
	}
	if err := DecodeJSON(r, dst); err != nil {
		WriteAPIError(w, err)
		return false
	}
	if err := (*dst).Validate(); err != nil {
		WriteError(w, err)
		return false
	}
	return true
}

// deviceInPath reads and checks {registry} and {device_id} (400 invalid_id). On failure it
// writes the error and returns false.
func deviceInPath(w http.ResponseWriter, r *http.Request) (string, device.DeviceRef, bool) {
	registry, ref := r.PathValue("registry"), device.DeviceRef{DeviceID: r.PathValue("device_id")}
	if !ValidName(registry) {
		WriteAPIError(w, InvalidID("registry", registry))
		return "", ref, false
	}
	if err := ref.Validate(); err != nil {
		WriteError(w, err)
		return "", ref, false
	}
	return registry, ref, true
}
