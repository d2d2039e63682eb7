-- contract: drops idempotency_keys.status_code and response, which older releases read and write.
-- An idempotency key remembers its request's result as plain data, not as an HTTP answer, so that every
-- carrier of a send (HTTP, SMTP) can replay it in its own terms. A key is done once `result` is set.
--   {"entries": [{"accepted": true, "id": …} | {"accepted": false, "error": {name, message, field?}}, …]}
--   {"refused": {name, message, field?}}
-- Answers stored before this migration are converted, so a retry within their 24 hours still replays.
ALTER TABLE idempotency_keys ADD COLUMN result jsonb;

UPDATE idempotency_keys SET result = CASE
    WHEN status_code <> 200 THEN jsonb_build_object('refused', response - 'statusCode')
    WHEN response ->> 'object' = 'email' THEN
      jsonb_build_object('entries', jsonb_build_array(jsonb_build_object('accepted', true, 'id', response -> 'id')))
    ELSE jsonb_build_object('entries', (
      SELECT coalesce(jsonb_agg(
               CASE WHEN entry ->> 'object' = 'email'
                    THEN jsonb_build_object('accepted', true, 'id', entry -> 'id')
                    ELSE jsonb_build_object('accepted', false,
                           'error', entry - 'object' - 'id' - 'index' - 'statusCode')
               END ORDER BY position), '[]'::jsonb)
        FROM jsonb_array_elements(response -> 'data') WITH ORDINALITY AS list(entry, position)))
  END
 WHERE status_code IS NOT NULL;

ALTER TABLE idempotency_keys DROP COLUMN status_code, DROP COLUMN response;
