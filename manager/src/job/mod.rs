//! The life of one manager Job, as pure decisions over plain data: where it
//! stands ([`lifecycle`]) and what to do next ([`life`]), what follows the fleet's answer
//! ([`plan`]) and what the fleet answers ([`views`]), why a mirror is
//! withdrawn ([`withdrawal`]), the mirror built from it ([`mirror`]), where it
//! goes ([`placement`]), how long it and its mirror are kept ([`retention`]),
//! what a lost mirror means ([`loss`]) and the status copied onto it
//! ([`status`]). Nothing here talks to an API server.

pub mod life;
pub mod lifecycle;
pub mod loss;
pub mod placement;
pub mod plan;
pub mod retention;
pub mod status;
pub mod views;
pub mod withdrawal;
