package gateway

import (
	"net/http"

	"github.com/waggle-os/core/libs/personas"
	"github.com/waggle-os/core/services/gateway/internal/respond"
)

// personaList is the body of GET /api/personas (the original's shape:
// system prompts and tool lists are not listed).
type personaList struct {
	Personas []personas.Persona `json:"personas"`
}

// listPersonas lists the built-in personas a chat may name.
func (s *Service) listPersonas(w http.ResponseWriter, _ *http.Request) {
	respond.JSON(w, http.StatusOK, personaList{Personas: personas.List()})
}
