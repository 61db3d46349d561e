-- The first post to a topic counts its queue's topics (the cap on topics per queue,
-- plane.CheckTopicCount): the journal names "t/NS/QUEUE/" to "t/NS/QUEUE0" in byte order
-- (planekit.TopicRange). The primary key is in the database's collation, which need not be
-- byte order (nor keep one prefix's names together): this index makes the count one range
-- read of the queue's topics whatever the collation.
CREATE INDEX topics_byte_order ON {schema}.topics (journal COLLATE "C");
