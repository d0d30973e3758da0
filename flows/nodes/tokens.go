package nodes

import (
	"fmt"
	"sync"

	"github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
)

// Tokens are counted with OpenAI's cl100k_base encoding (its embedding models' and
// gpt-4's), read from the tables compiled into the binary: nothing is downloaded. Other
// models count a little differently; a window or a chunk "of N tokens" is meant as a
// budget, not an exact count for every model.
const tokenEncoding = "cl100k_base"

var tokenizer struct {
	once sync.Once
	enc  *tiktoken.Tiktoken
	err  error
}

// encoding loads the encoding once (about a tenth of a second), on first use.
func encoding() (*tiktoken.Tiktoken, error) {
	tokenizer.once.Do(func() {
		tiktoken.SetBpeLoader(tiktokenloader.NewOfflineLoader())
		tokenizer.enc, tokenizer.err = tiktoken.GetEncoding(tokenEncoding)
		if tokenizer.err != nil {
			tokenizer.err = fmt.Errorf("the %s tokenizer: %w", tokenEncoding, tokenizer.err)
		}
	})
	return tokenizer.enc, tokenizer.err
}

// countTokens is how many tokens text is.
func countTokens(text string) (int, error) {
	enc, err := encoding()
	if err != nil {
		return 0, err
	}
	return len(enc.EncodeOrdinary(text)), nil
}
