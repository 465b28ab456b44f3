//! Operations (issue 7): the shim's metrics endpoint scraped by a real Prometheus, snapshots on
//! demand, OOM dumps, budgets and fault injection, on C clients on the simulated driver.
