"""How text becomes ids and back: tokenizers, chat formats, and the call syntaxes."""
