package api

import "net/http"

func (s *Server) registerOracle(mux *http.ServeMux) {}
