package sim

import (
	"strings"
	"unicode"
)

// A chat request may ask the engine to continue its final message instead of answering
// it, as vLLM's continue_final_message does (with add_generation_prompt false): the chat
// template renders the conversation without the generation prompt, and the rendered text
// is cut right after the final message's text, so the final message stays open and the
// model writes on from its last character. A client uses it to continue an answer that
// was cut off, sending the text it received back as the final assistant message.
//
// vLLM's rules, each kept here:
//   - continue_final_message together with an explicit add_generation_prompt: true is
//     refused by the request model's validator ("Cannot set both ...", a 400 validation
//     error);
//   - continue_final_message alone leaves add_generation_prompt at its default, true, and
//     transformers' apply_chat_template refuses the pair ("continue_final_message and
//     add_generation_prompt are not compatible ..."), which vLLM answers 400 with the
//     message twice (its ValueError and the cause it wraps);
//   - the cut is transformers' (render_jinja_template, 4.x): the last occurrence of the
//     final message's text with surrounding whitespace stripped, kept with its leading
//     whitespace and, when the template kept it, its trailing whitespace;
//   - the role of the final message is not checked, and the answer does not repeat the
//     continued text (echo is false by default).

const (
	// cannotSetBoth is the message of vLLM's check_generation_prompt validator.
	cannotSetBoth = "Cannot set both `continue_final_message` and `add_generation_prompt` to True."
	// notCompatible is transformers' refusal of the pair.
	notCompatible = "continue_final_message and add_generation_prompt are not compatible. Use continue_final_message when you want the model to continue the final message, and add_generation_prompt when you want to add a header that will prompt it to start a new assistant message instead."
	// finalNotInChat is transformers' refusal of a final message the template lost.
	finalNotInChat = "continue_final_message is set but the final message does not appear in the chat after applying the chat template! This can happen if the chat template deletes portions of the final message. Please verify the chat template and final message in your chat to ensure they are compatible."
)

// openTurn is the final message a continued chat leaves open: the rendered prompt up to
// where that message's text starts, the text the prompt keeps of it, and its role.
type openTurn struct {
	head string
	text string
	role string
}

// renderContinued renders messages with the final one left open, as transformers does
// for continue_final_message. It returns the prompt and the open turn, or transformers'
// error message.
func renderContinued(messages []Message) (string, *openTurn, string) {
	rendered := renderChat(messages, false)
	last := messages[len(messages)-1]
	head := renderChat(messages[:len(messages)-1], false) + "<|im_start|>" + last.Role + "\n"
	final := last.Content
	stripped := strings.TrimFunc(final, pyIsSpace)
	if !strings.Contains(rendered, stripped) {
		return "", nil, finalNotInChat
	}
	loc := strings.LastIndex(rendered, stripped)
	lstripped := strings.TrimLeftFunc(final, pyIsSpace)
	end := loc + len(stripped)
	if e := loc + len(lstripped); e <= len(rendered) && rendered[loc:e] == final {
		// The template kept the message's spacing, or it has none at its end.
		end = e
	}
	prompt := rendered[:end]
	turn := &openTurn{head: head, role: last.Role}
	if strings.HasPrefix(prompt, head) {
		turn.text = prompt[len(head):]
	}
	return prompt, turn, ""
}

// pyIsSpace is Python's str.isspace for one character, which str.strip uses: Unicode's
// white space and also the separators U+001C..U+001F.
func pyIsSpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }

// continuation returns the generator of a sequence whose prompt ends in turn, an open
// assistant message. When the message's text is the first k tokens this replica would
// have written for the conversation before it (the same salt and seed: its own answer,
// cut short), the model goes on from token k and ends where that answer would have
// ended, as a greedy model continuing its own words does. Any other text — another
// replica's answer, a sampled answer with another seed, text the model did not write —
// is simply part of a new prompt (gen), as it is to a real model.
func continuation(salt string, seed int64, gen generator, turn *openTurn) generator {
	if turn == nil || turn.role != "assistant" || turn.text == "" {
		return gen
	}
	own := newGenerator(salt, seed, turn.head)
	natural := own.naturalLength()
	rest := turn.text
	k := 0
	for k < natural && rest != "" {
		w := vocabulary[own.word(k)]
		if !strings.HasPrefix(rest, w) {
			return gen
		}
		rest = rest[len(w):]
		k++
	}
	if rest != "" || k >= natural {
		return gen
	}
	own.offset = k
	return own
}
