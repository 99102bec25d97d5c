package upstream

import (
	"errors"
	"strconv"
)

// Op is the step of an exchange on which Client.Do or Response.Read failed.
type Op uint8

const (
	// OpDial: no connection was made (the dial, or its TLS handshake, failed). No byte of
	// the request was written.
	OpDial Op = iota + 1
	// OpWrite: writing the request failed; Error.Sent says how much of it was written.
	OpWrite
	// OpReadHead: the request was written; reading the status line and headers failed.
	OpReadHead
	// OpReadBody: the response had begun; reading its body failed.
	OpReadBody
)

func (o Op) String() string {
	switch o {
	case OpDial:
		return "dial"
	case OpWrite:
		return "write request"
	case OpReadHead:
		return "read response head"
	case OpReadBody:
		return "read response body"
	}
	return "op " + strconv.Itoa(int(o))
}

// Sent is how much of a request the connection accepted before the exchange failed.
type Sent uint8

const (
	// SentNothing: not one byte of the request was written, so the engine cannot have
	// seen it, whatever else happened on the connection.
	SentNothing Sent = iota
	// SentPart: part of the request was written. The engine may have read a prefix of it,
	// never the whole of it.
	SentPart
	// SentAll: the whole request was written; the engine may have read all of it.
	SentAll
)

func (s Sent) String() string {
	switch s {
	case SentNothing:
		return "nothing sent"
	case SentPart:
		return "request partly sent"
	case SentAll:
		return "request sent"
	}
	return "sent " + strconv.Itoa(int(s))
}

// Error is every error of Client.Do and Response.Read other than io.EOF: which step
// failed, on which connection, and how much of the request the engine may have received.
// Err is the cause, in the forms ClassifyError knows: a *net.OpError, io.EOF,
// io.ErrUnexpectedEOF, a *ProtocolError, ErrServerClosedIdle, or the context's error when
// the request's context ended.
type Error struct {
	Op   Op
	Addr string // the replica's host:port
	// Reused: the connection came from the pool, having carried an earlier exchange.
	Reused bool
	Sent   Sent
	Err    error
}

func (e *Error) Error() string {
	s := "upstream " + e.Addr + ": " + e.Op.String()
	if e.Reused {
		s += " (reused connection, "
	} else {
		s += " ("
	}
	return s + e.Sent.String() + "): " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// ErrServerClosedIdle marks an exchange on a reused connection that ended, by the engine's
// FIN or reset, before one byte of a response arrived: the engine closed the kept-alive
// connection as it was reused. It cannot say whether the engine read the request — its
// close may have crossed the request on the wire, or it may have read it and died — so
// the client never sends the request again; Error.Sent says whether any of it was written,
// and the caller decides (docs/design.md §3).
var ErrServerClosedIdle = errors.New("server closed an idle connection as it was reused")

// ErrInvalidRequest is a request this client will not write: a method that is not a token,
// a path that is not an origin-form target, a header that is malformed or one the client
// writes itself (framing and connection headers). Nothing was sent.
var ErrInvalidRequest = errors.New("invalid upstream request")

// ErrBodyClosed is returned by Read after Close.
var ErrBodyClosed = errors.New("read on a closed upstream response")

// ProtocolError is a response this client could not parse: a malformed status line or
// header, a head over the limits, framing it does not accept (a bad chunk size, an
// unsupported Transfer-Encoding, conflicting Content-Lengths). The connection is closed.
type ProtocolError struct {
	What string
}

func (e *ProtocolError) Error() string { return "malformed response: " + e.What }
