/* global process, fetch, AbortSignal */
// The container's health check: /healthz answers on the API's port, or on the metrics port of a process
// that has no API (serve --role worker). Exits 0 when it answers 200 within 2 s.
const port = process.env.MAILROOM_METRICS_PORT || process.env.PORT || '3000';
fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(2000) }).then(
  (response) => process.exit(response.ok ? 0 : 1),
  () => process.exit(1),
);
