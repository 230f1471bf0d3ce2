-- The minimal job transaction: claim one row, call work(), delete the row.
WITH job AS (
	DELETE FROM queue
	 WHERE id = (SELECT id FROM queue ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
	RETURNING id
)
SELECT work(id) FROM job;
