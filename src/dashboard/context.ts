/**
 * What every page and action of one request works with.
 *
 * @internal
 * @module
 */
import type { Queue } from "../queue.ts";

/** One request's view of the dashboard. */
export interface PageContext {
  /** The queue shown. */
  readonly queue: Queue;
  /** The path the dashboard is mounted under, `""` at the root; never ends with `/`. */
  readonly base: string;
  /** The dashboard's title. */
  readonly title: string;
  /** Whether this request may take actions (the gate said so and the dashboard is not read-only). */
  readonly canWrite: boolean;
  /** The CSRF token forms carry; empty where no form is drawn. */
  readonly csrfToken: string;
  /** The nonce of the page's inline script and style. */
  readonly nonce: string;
  /** The request's URL. */
  readonly url: URL;
  /**
   * The request's path rebuilt from its route: `base`, then its segments
   * joined by one `/` each. Links to the page itself use it, never
   * `url.pathname`, which may start with `//` (a protocol-relative link).
   */
  readonly path: string;
}
