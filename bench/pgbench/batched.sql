-- The same loop in batches of 100, one subtransaction per call.
SELECT work_batch(100);
