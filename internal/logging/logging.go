// Package logging builds the log/slog loggers of the long-running commands: JSON lines by
// default (what log pipelines parse), text for people at a terminal.
package logging

import (
	"fmt"
	"io"
	"log/slog"
)

// Formats are the values of --log-format.
const (
	JSON = "json"
	Text = "text"
)

// New returns a logger writing format to w.
func New(format string, w io.Writer) (*slog.Logger, error) {
	switch format {
	case JSON, "":
		return slog.New(slog.NewJSONHandler(w, nil)), nil
	case Text:
		return slog.New(slog.NewTextHandler(w, nil)), nil
	}
	return nil, fmt.Errorf("--log-format: %q is neither json nor text", format)
}
