package kvevents

// Kind is what an event says happened to the engine's prefix cache.
type Kind uint8

const (
	// Stored: full blocks were cached (vLLM's BlockStored).
	Stored Kind = iota + 1
	// Removed: cached blocks were evicted (BlockRemoved).
	Removed
	// Cleared: the whole prefix cache was reset (AllBlocksCleared).
	Cleared
)

var kindNames = [...]string{Stored: "BlockStored", Removed: "BlockRemoved", Cleared: "AllBlocksCleared"}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "unknown"
}

// Hash is a block hash as the engine published it: vLLM sends the low 64 bits of its
// block hash as an integer by default (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1) and the raw
// digest bytes otherwise; versions before 0.10 sent Python's signed hash(). An integer
// is kept as its 8 big-endian bytes, so either form compares as bytes.
type Hash string

// Event is one KV cache event. Fields an event kind does not have are zero.
type Event struct {
	Kind   Kind
	Hashes []Hash
	// Parent is the hash of the block before the first stored one ("" : none, the stored
	// blocks start the prompt).
	Parent Hash
	// Tokens is the number of token ids the stored blocks hold (len(token_ids)).
	Tokens int
	// TokenIDs are the stored blocks' token ids, for EncodeBatch (DecodeBatch counts them
	// in Tokens and keeps none).
	TokenIDs  []uint32
	BlockSize int
	// Medium is where the blocks live ("GPU"; "" when the engine does not say).
	Medium string
	// Group is the KV cache group of the blocks (vLLM's group_idx), when HasGroup: a
	// hybrid model (full attention and sliding-window layers, or linear attention) keeps
	// one group per kind of layer, and the same tokens are stored, and published, once in
	// each. GroupKind is the group's kind on a Stored event ("full_attention",
	// "sliding_window", ...; "" when the engine does not say).
	Group     int
	HasGroup  bool
	GroupKind string
}

// StoredTokens is how many tokens a Stored event put in the cache: its token ids, or its
// blocks times the block size when it carries no token ids.
func (e Event) StoredTokens() int {
	if e.Tokens > 0 {
		return e.Tokens
	}
	return len(e.Hashes) * e.BlockSize
}

// Batch is one published message: the events of one engine step.
type Batch struct {
	// TS is the engine's time of the batch, seconds since the epoch.
	TS     float64
	Events []Event
	// DPRank is the data-parallel rank that published it (-1: not said).
	DPRank int
}
