//! Patch-wise aggregation on the CPU (aggregation radius r > 0; the definition is in
//! [`crate::nlm::reference`]): per band of output rows and per search offset, the weight image of
//! the band and r rows on either side, its (2r+1)^2 box sums inside the plane, accumulated.
//!
//! Simpler than the pixel-wise path beside it: no symmetric reuse of `+d/-d` (the box sums of a
//! pair differ at the plane's edges), no tiles, and no exact f64 fallback: results are the f32
//! mean rounded, within one code value of the reference (8-bit; one 8-bit code value in stored
//! units for deeper formats) where the largest weight a sample sees is above f32's range floor
//! (`exp(-80)`): strengths far below the content's patch distances can keep the input there where
//! the reference averages.

use super::kernels;
use super::{Band, Frames, GroupCtx};

/// Row buffers of one worker (in its [`super::Scratch`]).
#[derive(Default)]
pub(super) struct Buffers {
    v: Vec<f32>,
    p: Vec<f32>,
    x: Vec<f32>,
    wrow: Vec<f32>,
    hsum: Vec<f32>,
    wmax: Vec<f32>,
    spread: Vec<f32>,
    acc: Vec<f32>,
    wsum: Vec<f32>,
}

/// Denoises `band` of `ctx`'s group; returns 0 (no sample takes an exact path).
#[inline(always)]
pub(super) fn band(ctx: &GroupCtx, frames: &Frames, band: &mut Band, bufs: &mut Buffers) -> usize {
    let g = ctx.group;
    let plan = ctx.plan;
    let (a, s, r) = (plan.search_radius as isize, plan.patch_radius as usize, plan.aggregation_radius as usize);
    let (sx, sy) = (g.guide_step_x, g.guide_step_y);
    let (w, h) = (ctx.width, ctx.height);
    // Rows whose weights reach the band: r on either side, inside the plane.
    let (ey0, ey1) = (band.y0.saturating_sub(r), (band.y1 + r).min(h));
    let (ne, nb) = (ey1 - ey0, band.y1 - band.y0);
    let nout = g.outputs.len();
    let nv = sx * (w - 1) + 2 * s + 1;
    // The worker's buffers, kept between frames: nothing is allocated per band once they fit.
    let Buffers { v, p, x, wrow, hsum, wmax, spread, acc, wsum } = bufs;
    let fit = |b: &mut Vec<f32>, n: usize| {
        b.clear();
        b.resize(n, 0.0);
    };
    fit(v, nv);
    for b in [&mut *p, &mut *x, &mut *wrow, &mut *spread] {
        fit(b, w);
    }
    // Horizontal box sums of each extended row's weights; the largest weight per position.
    fit(hsum, ne * w);
    fit(wmax, ne * w);
    fit(acc, nout * nb * w);
    fit(wsum, nb * w);
    let (v, p, x, wrow, spread) = (&mut v[..], &mut p[..], &mut x[..], &mut wrow[..], &mut spread[..]);
    let (hsum, wmax, acc, wsum) = (&mut hsum[..], &mut wmax[..], &mut acc[..], &mut wsum[..]);
    let target = frames.iter().find(|(dt, _)| *dt == 0).expect("target frame").1;
    let gx_t = -(s as isize);
    // Vertical sums slide from row to row where that is exact (8-bit: integers below 2^24) and the
    // guide step does not skip whole patches; elsewhere each row's are summed afresh.
    let full_init = sy > 2 * s + 1 || !ctx.running_sums_exact;
    for &(dt, frame) in frames {
        for dy in -a..=a {
            for dx in -a..=a {
                if dt == 0 && dx == 0 && dy == 0 {
                    continue;
                }
                let gx_u = gx_t + sx as isize * dx;
                let gdy = sy as isize * dy;
                for ye in 0..ne {
                    let y = (ey0 + ye) as isize;
                    super::weight_row(ctx, target, frame, y, (gx_t, gx_u, gdy), ye == 0 || full_init, v, p, wrow, x);
                    let m = &mut wmax[ye * w..(ye + 1) * w];
                    for (mi, &wi) in m.iter_mut().zip(wrow.iter()) {
                        *mi = mi.max(wi);
                    }
                    box_row(&mut hsum[ye * w..(ye + 1) * w], wrow, r);
                }
                for yb in 0..nb {
                    let y = band.y0 + yb;
                    column_sum(spread, hsum, w, y - r.min(y) - ey0, (y + r + 1).min(ey1) - ey0);
                    let ws = &mut wsum[yb * w..(yb + 1) * w];
                    for (t, &c) in ws.iter_mut().zip(spread.iter()) {
                        *t += c;
                    }
                    for (oi, &o) in g.outputs.iter().enumerate() {
                        let src = frame.planes[o].row(dx, y as isize + dy, w);
                        kernels::acc_values(&mut acc[(oi * nb + yb) * w..][..w], spread, src);
                    }
                }
            }
        }
    }
    // The centre: wref times the spread of the largest weights, the target's own sample.
    for ye in 0..ne {
        box_row(&mut hsum[ye * w..(ye + 1) * w], &wmax[ye * w..(ye + 1) * w], r);
    }
    let maxv = plan.max_value as f32;
    for yb in 0..nb {
        let y = band.y0 + yb;
        column_sum(spread, hsum, w, y - r.min(y) - ey0, (y + r + 1).min(ey1) - ey0);
        for (oi, &o) in g.outputs.iter().enumerate() {
            let centre = target.planes[o].row(0, y as isize, w);
            for xi in 0..w {
                let wc = plan.wref * spread[xi];
                let total = wsum[yb * w + xi] + wc;
                let value = if total > 0.0 { (acc[(oi * nb + yb) * w + xi] + wc * centre[xi]) / total } else { centre[xi] };
                let q = (value + 0.5).floor().clamp(0.0, maxv);
                band.outs[oi].set(yb * w + xi, q as u32);
            }
        }
    }
    0
}

/// `out[x]` = sum of `row[x - r ..= x + r]` inside the row, summed afresh for every `x`: a sum
/// that slides (add the entering weight, subtract the leaving one) keeps the rounding error of
/// weights near 1 where the true sum is 1e-12, and turns rare patches' samples into noise.
/// The interior (every x with its whole window in the row) is built as 2r + 1 passes of slice
/// additions that the compiler vectorizes, in the same order as the edges' sums: the same f32
/// results as summing each window left to right.
#[inline(always)]
fn box_row(out: &mut [f32], row: &[f32], r: usize) {
    let n = row.len();
    let edge = |x: usize| -> f32 { row[x.saturating_sub(r)..(x + r + 1).min(n)].iter().sum() };
    if n <= 2 * r {
        for (x, o) in out[..n].iter_mut().enumerate() {
            *o = edge(x);
        }
        return;
    }
    let inner = n - 2 * r;
    out[r..n - r].copy_from_slice(&row[..inner]);
    for k in 1..=2 * r {
        for (o, &v) in out[r..n - r].iter_mut().zip(&row[k..k + inner]) {
            *o += v;
        }
    }
    for x in (0..r).chain(n - r..n) {
        out[x] = edge(x);
    }
}

/// `out[x]` = sum over rows `y0..y1` of `rows[y * w + x]`.
#[inline(always)]
fn column_sum(out: &mut [f32], rows: &[f32], w: usize, y0: usize, y1: usize) {
    out.fill(0.0);
    for y in y0..y1 {
        for (o, &v) in out.iter_mut().zip(&rows[y * w..(y + 1) * w]) {
            *o += v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::box_row;

    /// The vectorized interior gives, bit for bit, the sum of each window left to right (the
    /// definition the edges keep), for rows shorter and longer than the window.
    #[test]
    fn box_row_equals_each_window_summed_in_order() {
        let row: Vec<f32> = (0..41).map(|i| ((i * 7919 % 97) as f32 * 0.37).exp2() * 1e-9 + (i % 5) as f32).collect();
        for r in 0..=7 {
            for n in 1..=row.len() {
                let mut out = vec![f32::NAN; n];
                box_row(&mut out, &row[..n], r);
                for (x, &o) in out.iter().enumerate() {
                    let want: f32 = row[x.saturating_sub(r)..(x + r + 1).min(n)].iter().sum();
                    assert_eq!(o.to_bits(), want.to_bits(), "r={r} n={n} x={x}");
                }
            }
        }
    }
}
