// Package chaos runs randomized fault scenarios against a gateway in front of simulated
// replicas, all on loopback, and checks every request's history against the client
// contract: each client saw one complete answer from one replica, or a prefix of one
// replica's answer ended by exactly one interruption event, or an error before any output;
// never a repeated fragment, a splice of two replicas, a silent truncation, or a journal
// that tells another story. The requests use every API the gateway serves: chat and text
// completions, the Anthropic Messages and OpenAI Responses APIs (streamed and whole, some
// Responses requests continuing an earlier response of the run), and embeddings on a pool
// of their own; the checker reads each in its own shapes. Its clients misbehave too: some
// stop reading or leave part-way, and keyed ones send their request again. judge is a pure function of one
// request's history (client, retries, journal, engine records, the replicas' own
// answers), so its rules are tested on crafted histories as well as on runs.
//
// It is a tool around the product (the `fencegate chaos` command and a test); it may
// import the gateway and the simulator, and nothing imports it.
package chaos
