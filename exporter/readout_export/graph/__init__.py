"""The torch side of the graph: the source model loaded (`loader`, a `peft` adapter applied by `adapter`), its
architecture described
(`architecture`), the readout composed as small torch stages around it (`readout`), the ABI record built
(`record`) with weight digests (`weights`), and the traced ONNX export checked against eager PyTorch
(`onnx_export`). Everything here is made from a resolved `readout_export.planning.plan.Plan` (the tokenizer
loaded and saved as the record says: `readout_export.planning.tokenizer_io`); planning imports nothing here."""
