-- expand: the automatic pause of a broadcast whose hard bounces or complaints pass their thresholds
-- (broadcasts/auto-pause.ts): when it paused the broadcast. Set once, in the transaction that pauses it
-- and emits broadcast.paused, by a conditional UPDATE: checks racing in several processes pause and
-- announce it once, and a broadcast resumed by hand after it is not paused automatically again.
ALTER TABLE broadcasts ADD COLUMN auto_paused_at timestamptz;
