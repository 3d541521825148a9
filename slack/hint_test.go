package slack

import "testing"

func TestHintOfAStoredFailure(t *testing.T) {
	for in, want := range map[string]string{
		"chat.postMessage: channel_not_found":                           hint("channel_not_found"),
		"resent by an operator after: chat.postMessage: not_in_channel": hint("not_in_channel"),
		"chat.postMessage: fatal_error":                                 "",
		"":                                                              "",
	} {
		if got := HintOf(in); got != want || (in != "" && want == "" && got != "") {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
	if HintOf("chat.postMessage: channel_not_found") == "" {
		t.Fatal("no hint for channel_not_found")
	}
}
