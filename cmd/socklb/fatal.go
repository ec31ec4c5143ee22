package main

import (
	"log/slog"

	logsapi "k8s.io/component-base/logs/api/v1"
)

// errLogged is a fatal error the agent wrote as its log's last record:
// main exits 1 without printing it again.
type errLogged struct{ error }

func (e errLogged) Unwrap() error { return e.error }

// logFatal writes err as one record of the agent's log when that log is
// JSON: a pipeline reading one JSON object per line would otherwise drop,
// or choke on, the line that says why the agent stopped. In text the error
// stays main's one "socklb agent: ..." line.
func logFatal(log *slog.Logger, c *logsapi.LoggingConfiguration, err error) error {
	if err == nil || c.Format != logsapi.JSONLogFormat {
		return err
	}
	log.Error("socklb agent failed", "err", err)
	return errLogged{err}
}

// failBeforeLogging is logFatal for an error found before the logging
// flags were applied (a flag, the config file): in JSON when they ask for
// it and can be applied. A config file that could not be read has set no
// format; --logging-format on the command line has.
func failBeforeLogging(c *logsapi.LoggingConfiguration, err error) error {
	if c.Format != logsapi.JSONLogFormat {
		return err
	}
	log, flush, lerr := startLogging(c)
	if lerr != nil {
		return err
	}
	defer flush()
	return logFatal(log, c, err)
}
