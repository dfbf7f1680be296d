"""Real text for the tests: mixed lengths, from one content token up to long passages."""

TEXTS = [
    "Hello",
    "The cat sat on the mat.",
    "Readout export keeps pooling, normalization and the label map inside the compiled graph.",
    "Left padding silently changes BERT-style outputs unless position ids come from the mask.",
    "Paris is the capital of France, and Berlin is the capital of Germany.",
    "naïve café résumé — déjà vu",
    "A measurement not taken is not evaluated, never a silent pass; a tampered file is refused.",
    "short one",
    "hello 🤗 world",  # the emoji is [UNK] in WordPiece vocabularies: content, not a special row
    ("Transformers encode every token of a sentence into a contextual vector. The readout decides which rows "
     "are pooled, whether special tokens count, how the vectors are projected and normalized, and what the "
     "numbers mean: logits, probabilities or cosine similarities. Exporting only the backbone loses that."),
]

PAIRS = [
    ("Who wrote the report?", "The report was written by Ada Lovelace in London in 1843."),
    ("Where is the Eiffel Tower?", "The Eiffel Tower stands in Paris, the capital of France."),
    ("What changes outputs?", "Left padding with unshifted absolute positions changes BERT outputs."),
    ("Why?", "Because shape is not meaning."),
    ("How long is the river?", "The river runs for about 300 kilometres before it reaches the sea, passing "
                               "through three cities and many small villages along its banks."),
    ("cat", "The cat sat on the mat."),
    ("What is exported?", "The graph with its readout: pooling, projection, normalization and the head."),
    ("Which rows are pooled?", " ".join(["The readout decides which rows are pooled, whether special tokens count, "
                                          "how vectors are projected and normalized, and what numbers mean."] * 4)),
]  # the last context is longer than 128 tokens: truncation cuts the context, never the question

CHOICES = [
    ("The capital of France is", ["Paris.", "Berlin, a city in Germany.", "the moon"]),
    ("A zero-row pool is", ["refused loudly.", "a silent zero vector that enters the index", "fine"]),
    ("Padding is", ["not identity", "identity", "a position shift that changes every row of the batch"]),
    ("Which runtime needs no torch?", ["the thin SDK", "eager PyTorch", "a notebook"]),
    ("Outputs return", ["in input order", "sorted by length", "at random"]),
    ("A tampered file is", ["refused with its name", "loaded anyway", "silently repaired"]),
    ("Max pooling fills invalid rows with", ["minus infinity", "zero", "the mean of the valid rows"]),
]
