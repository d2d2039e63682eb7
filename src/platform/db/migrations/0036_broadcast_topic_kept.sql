-- expand: A broadcast keeps the id of its topic when the topic is deleted, instead of losing it: a broadcast
-- that was to reach only a topic's subscribers must not, its topic gone, reach every contact. Sending
-- such a broadcast is refused, and one whose topic is deleted while it is scheduled fails when due.
ALTER TABLE broadcasts DROP CONSTRAINT broadcasts_topic_id_fkey;
