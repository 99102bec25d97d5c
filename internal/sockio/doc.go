// Package sockio reads and writes a TCP socket without the runtime's system-call
// bookkeeping, for the gateway's and the agent's streams.
//
// A socket that net gives us is non-blocking: a read or a write returns at once, with
// EAGAIN when there is nothing to read or no room to write, and the runtime's poller then
// parks the goroutine until there is. Yet net's Read and Write enter the kernel as a call
// that may block (entersyscall, exitsyscall), and the runtime's monitor hands the
// processor of a thread that stays in such a call past 20 µs to another thread: a write on
// loopback does the receiving side's TCP work in the writer's call, which in a virtual
// machine often takes that long, so a stream's token was costing thread hand-offs and
// futex wake-ups besides its two system calls. Here the calls are made raw (as net's own
// poller makes epoll_wait), and waiting stays the poller's: deadlines, and a Close from
// another goroutine, end a wait as they end net's. docs/performance.md ("Raw socket
// calls") has the measurement.
//
// Off Linux, and for a connection that is not a socket (TLS, a net.Pipe in tests), the
// calls are net's own.
package sockio
