"""`readout_sdk.load` and `Engine`: typed results from an artifact, without torch, in four small steps.

- loading (`readout_sdk.engine.loading`): an artifact path -> a verified artifact, its target and runner;
- prepare (`readout_sdk.engine.prepare`): items -> :class:`PreparedItems` (checked, tokenized, windowed;
  token counts and truncation flags) -> :class:`PreparedBatch` (padded feeds, sorted by length);
- run (`readout_sdk.engine.run`): batches -> raw outputs through the runner;
- decode (`readout_sdk.engine.decode`): raw outputs -> the family's typed results.

:class:`Engine` is the façade over them (`readout_sdk.engine.facade`); ``engine.prepare``, ``engine.execute``
and ``engine.decode`` expose the steps to front ends that count, bound or batch items themselves (the HTTP
server prepares each request once, off its event loop, and runs the prepared items).
"""
from readout_sdk.engine.decode import DECIDE_RUN, Traced
from readout_sdk.engine.facade import Engine, EngineClosed
from readout_sdk.engine.loading import load, select
from readout_sdk.engine.prepare import CHUNK, Preparer
from readout_sdk.engine.prepared import PreparedBatch, PreparedItems

__all__ = ["CHUNK", "DECIDE_RUN", "Engine", "EngineClosed", "PreparedBatch", "PreparedItems", "Preparer", "Traced",
           "load", "select"]
