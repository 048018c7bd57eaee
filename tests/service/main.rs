//! The Tower service and its cache: the layer, the Tower contract, concurrency
//! and the promises, allocations, gRPC, token slots, seams, faults, step-up, a
//! soak.

#[path = "../support/mod.rs"]
mod support;

mod allocations;
mod concurrency;
mod faults;
mod grpc;
mod layer;
mod network_failures;
mod promises;
mod reauthentication;
mod seams;
mod soak;
mod step_up;
mod token_params;
mod tower_contract;
