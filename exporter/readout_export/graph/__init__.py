"""The torch side of the graph: the source model loaded (`loader`, a `peft` adapter applied by `adapter`), its
architecture described
(`architecture`), the readout composed as small torch stages around it (`readout`), the ABI record built
(`record`) with weight digests (`weights`), the tokenizer saved as the record says (`tokenizer_io`), and
the traced ONNX export checked against eager PyTorch (`onnx_export`)."""
