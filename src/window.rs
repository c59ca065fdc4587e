//! The temporal window: which frames exist, which ring slot holds each, and when a frame's output
//! can be computed. Pure bookkeeping shared by every backend; the frames themselves live in the
//! backend's ring (host memory for the CPU backends, device memory for CUDA).

/// A reference frame of a job: its ring slot and its distance in frames from the target
/// (negative: past, positive: future).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reference {
    pub slot: usize,
    pub dt: i32,
}

/// One output frame to compute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// Which run of frames (counted from 0, one more after every reset of the window): with
    /// `seq` it names a frame for good, so that an algorithm may keep what it derived from a ring
    /// slot's frame (BM3D's basic estimates) across jobs.
    pub epoch: u64,
    /// Sequence number of the target frame since the last reset.
    pub seq: u64,
    /// Ring slot of the target frame.
    pub slot: usize,
    /// Other frames of the window that exist, ordered by `dt`.
    pub references: Vec<Reference>,
}

impl Job {
    /// Ring slots the job reads: the target's, then the references'.
    pub fn slots(&self) -> impl Iterator<Item = usize> + '_ {
        std::iter::once(self.slot).chain(self.references.iter().map(|r| r.slot))
    }

    /// The job's frames as (dt, ring slot) in time order; the target has dt 0.
    pub fn frames_in_time_order(&self) -> Vec<(i32, usize)> {
        let mut w: Vec<(i32, usize)> = self.references.iter().map(|r| (r.dt, r.slot)).collect();
        w.push((0, self.slot));
        w.sort_by_key(|f| f.0);
        w
    }
}

#[derive(Debug, Clone)]
pub struct TemporalWindow {
    past: u32,
    future: u32,
    slots: usize,
    /// Sequence number the next pushed frame gets.
    next_seq: u64,
    /// Sequence number of the next frame to hand out as a job.
    next_job: u64,
    draining: bool,
    epoch: u64,
    /// Sequence numbers of the frames that start a new shot (a scene cut before them), oldest
    /// first, those a job may still reach.
    shot_starts: std::collections::VecDeque<u64>,
}

impl TemporalWindow {
    /// `extra_slots` keeps frames alive for jobs still in flight on an asynchronous backend.
    pub fn new(past: u32, future: u32, extra_slots: usize) -> Self {
        let slots = (past + 1 + future) as usize + extra_slots;
        TemporalWindow { past, future, slots, next_seq: 0, next_job: 0, draining: false, epoch: 0, shot_starts: Default::default() }
    }

    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Registers a new frame; returns the ring slot it must be stored in. `starts_shot`: a scene
    /// cut lies before the frame ([`crate::scene`]): no job's window reaches across it.
    pub fn push(&mut self, starts_shot: bool) -> usize {
        let slot = (self.next_seq % self.slots as u64) as usize;
        if starts_shot && self.next_seq > 0 {
            self.shot_starts.push_back(self.next_seq);
        }
        self.next_seq += 1;
        slot
    }

    /// Frames pushed whose job has not been handed out yet.
    pub fn waiting(&self) -> u64 {
        self.next_seq - self.next_job
    }

    /// From now on, frames are processed without waiting for future frames (end of stream).
    pub fn drain(&mut self) {
        self.draining = true;
    }

    /// The next job whose window is complete (or, while draining, any pending job).
    pub fn next_job(&mut self) -> Option<Job> {
        let seq = self.next_job;
        if seq >= self.next_seq {
            return None;
        }
        if !self.draining && seq + (self.future as u64) >= self.next_seq {
            return None;
        }
        self.next_job += 1;
        // A cut with a later one at or before this job's frame bounds no job from now on.
        while self.shot_starts.len() > 1 && self.shot_starts[1] <= seq {
            self.shot_starts.pop_front();
        }
        let shot_first = self.shot_starts.iter().rev().find(|&&s| s <= seq).copied().unwrap_or(0);
        let next_shot = self.shot_starts.iter().find(|&&s| s > seq).copied().unwrap_or(u64::MAX);
        let first = seq.saturating_sub(self.past as u64).max(shot_first);
        let last = (seq + self.future as u64).min(self.next_seq - 1).min(next_shot - 1);
        let references = (first..=last).filter(|&s| s != seq).map(|s| Reference { slot: (s % self.slots as u64) as usize, dt: (s as i64 - seq as i64) as i32 }).collect();
        Some(Job { epoch: self.epoch, seq, slot: (seq % self.slots as u64) as usize, references })
    }

    /// Forgets every frame: the next frame starts a new window.
    pub fn reset(&mut self) {
        self.next_seq = 0;
        self.next_job = 0;
        self.draining = false;
        self.epoch += 1;
        self.shot_starts.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_only_window_grows_then_slides() {
        let mut w = TemporalWindow::new(2, 0, 0);
        assert_eq!(w.push(false), 0);
        let j = w.next_job().unwrap();
        assert!(j.references.is_empty());
        assert!(w.next_job().is_none());
        w.push(false);
        let j = w.next_job().unwrap();
        assert_eq!(j.references, vec![Reference { slot: 0, dt: -1 }]);
        w.push(false);
        w.push(false);
        let j = w.next_job().unwrap();
        assert_eq!((j.seq, j.slot), (2, 2));
        let j = w.next_job().unwrap();
        assert_eq!((j.seq, j.slot), (3, 0));
        assert_eq!(j.references, vec![Reference { slot: 1, dt: -2 }, Reference { slot: 2, dt: -1 }]);
    }

    #[test]
    fn future_frames_delay_jobs_until_drain() {
        let mut w = TemporalWindow::new(1, 2, 1);
        w.push(false);
        w.push(false);
        assert!(w.next_job().is_none());
        w.push(false);
        let j = w.next_job().unwrap();
        assert_eq!(j.seq, 0);
        assert_eq!(j.references.iter().map(|r| r.dt).collect::<Vec<_>>(), vec![1, 2]);
        assert!(w.next_job().is_none());
        w.drain();
        let j = w.next_job().unwrap();
        assert_eq!(j.references.iter().map(|r| r.dt).collect::<Vec<_>>(), vec![-1, 1]);
        assert_eq!(w.next_job().unwrap().references.iter().map(|r| r.dt).collect::<Vec<_>>(), vec![-1]);
        assert!(w.next_job().is_none());
        w.reset();
        assert_eq!(w.push(false), 0);
    }

    #[test]
    fn no_window_reaches_across_a_cut() {
        let mut w = TemporalWindow::new(2, 2, 0);
        // Shots: 0..=2, 3..=3 (a flash), 4..=7.
        for seq in 0..8u64 {
            w.push(seq == 3 || seq == 4);
        }
        w.drain();
        let windows: Vec<Vec<i32>> = std::iter::from_fn(|| w.next_job()).map(|j| j.references.iter().map(|r| r.dt).collect()).collect();
        assert_eq!(windows, [vec![1, 2], vec![-1, 1], vec![-2, -1], vec![], vec![1, 2], vec![-1, 1, 2], vec![-2, -1, 1], vec![-2, -1]]);
        // A reset forgets the cuts.
        w.reset();
        for _ in 0..5 {
            w.push(false);
        }
        w.drain();
        assert_eq!(std::iter::from_fn(|| w.next_job()).nth(3).unwrap().references.len(), 3);
    }
}
