package api

import "net/http"

func (s *Server) registerServers(mux *http.ServeMux) {}
