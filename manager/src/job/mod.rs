//! The life of one manager Job, as pure decisions over plain data: where it
//! stands ([`lifecycle`]) and what to do next ([`life`]), what follows the
//! fleet's answer ([`plan`]), why a mirror is withdrawn ([`withdrawal`]),
//! where it goes ([`placement`]), how long it and its mirror are kept
//! ([`retention`]), what a lost mirror means ([`loss`]) and when a mirror
//! that cannot start moves ([`stuck`]), and what its user is told of why
//! its Pods wait or failed ([`pods_why`]). The mirror's own
//! state is [`crate::mirror`]'s. Nothing here talks to an API server.

pub mod held_pods;
pub mod life;
pub mod lifecycle;
pub mod loss;
pub mod placement;
pub mod plan;
pub mod pods_why;
pub mod record;
pub mod refused;
pub mod retention;
pub mod stuck;
pub mod withdrawal;
