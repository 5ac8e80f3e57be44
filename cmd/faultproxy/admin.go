package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/faultinject"
)

// maxRulesBody bounds the body of PUT /rules.
const maxRulesBody = 1 << 20

// adminHandler serves the admin endpoints:
//
//	GET  /rules              the rules in force, JSON (?format=yaml or Accept: application/yaml for YAML)
//	PUT  /rules              replace the rules: a YAML or JSON body, validated, applied atomically;
//	                         ?restart=true also restarts the outage schedule now, in the same step;
//	                         an empty body (or only blanks and comments) or a null is refused: send {} to clear
//	GET  /counters           the injector's counters and gauges, JSON
//	GET  /healthz            "ok"
func adminHandler(in *faultinject.Injector, clk clock.Clock, log *slog.Logger) http.Handler {
	clk = clock.Or(clk)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /rules", func(w http.ResponseWriter, r *http.Request) {
		writeRules(w, r, in.Rules())
	})
	mux.HandleFunc("PUT /rules", func(w http.ResponseWriter, r *http.Request) {
		restart := false
		if v := r.URL.Query().Get("restart"); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				writeError(w, http.StatusBadRequest, errors.New("faultproxy: restart must be true or false"))
				return
			}
			restart = b
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRulesBody))
		if err != nil {
			writeError(w, http.StatusRequestEntityTooLarge, errors.New("faultproxy: rules body too large or unreadable"))
			return
		}
		if isEmptyRules(body) {
			// curl --data-binary @missing-file sends nothing after a
			// warning: that must not wipe every fault.
			writeError(w, http.StatusBadRequest, errEmptyRules)
			return
		}
		var rules faultinject.Rules
		if isJSON(r.Header.Get("Content-Type")) {
			if isJSONNull(body) {
				// A script that serialises an unset variable sends
				// null: that must not wipe every fault either.
				writeError(w, http.StatusBadRequest, errEmptyRules)
				return
			}
			rules, err = faultinject.ParseRules(body)
		} else {
			rules, err = parseRulesYAML(body)
		}
		if err == nil {
			if restart {
				// One step: no request sees the new rules on the old
				// schedule.
				err = in.UpdateWithEpoch(rules, clk.Now())
			} else {
				err = in.Update(rules)
			}
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		log.Info("rules updated", "rules", jsonString(rules), "restart", restart)
		writeRules(w, r, rules)
	})
	mux.HandleFunc("GET /counters", func(w http.ResponseWriter, r *http.Request) {
		_, active := in.Outage()
		writeJSON(w, http.StatusOK, countersResponse{
			Counters:     in.Snapshot(),
			Elapsed:      clk.Since(in.Epoch()).Round(time.Millisecond).String(),
			OutageActive: active,
		})
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	return mux
}

// countersResponse is the body of GET /counters.
type countersResponse struct {
	faultinject.Counters
	// Elapsed is the time since the outage schedule's epoch.
	Elapsed string `json:"elapsed"`
	// OutageActive says whether an outage window is in force now.
	OutageActive bool `json:"outage_active"`
}

func writeRules(w http.ResponseWriter, r *http.Request, rules faultinject.Rules) {
	if r.URL.Query().Get("format") == "yaml" || strings.Contains(r.Header.Get("Accept"), "yaml") {
		b, err := rulesYAML(rules)
		if err != nil {
			writeError(w, http.StatusInternalServerError, err)
			return
		}
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(b)
		return
	}
	writeJSON(w, http.StatusOK, rules)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, map[string]string{"error": err.Error()})
}

// errEmptyRules refuses a PUT /rules without rules: an empty body or a null.
var errEmptyRules = errors.New("faultproxy: empty rules body refused (nothing, or null: was a file missing, a variable unset?); send {} to clear every fault")

// isEmptyRules reports whether body holds no rules document at all: only
// blanks and YAML comments.
func isEmptyRules(body []byte) bool {
	for line := range bytes.Lines(body) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' {
			return false
		}
	}
	return true
}

// isJSONNull reports whether body is the JSON null, blanks around it.
func isJSONNull(body []byte) bool {
	return string(bytes.TrimSpace(body)) == "null"
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
