package api

import "net/http"

func (s *Server) registerDevices(mux *http.ServeMux) {}
