"""Push: warehouse rows (the `outbound` views) to the customer data hub, newest version per
key, each accepted row written to the ledger as its batch is accepted."""
