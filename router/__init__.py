"""Router library: document routing, tree search, hybrid in-node retrieval and synthesis."""
