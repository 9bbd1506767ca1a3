/**
 * Who may open the dashboard: the gate's answer for a request. By default
 * only requests whose connection comes from a loopback address.
 *
 * @internal
 * @module
 */

/** A gate's answer: `true` or `"write"` for full access, `"read"` to look only, `false` to refuse. */
export type DashboardAccess = boolean | "read" | "write";

/**
 * Decides whether a request may see the dashboard. It gets the request and
 * the connection's info (undefined when the app did not pass it on). A gate
 * that throws refuses.
 */
export type DashboardGate = (
  request: Request,
  info: Deno.ServeHandlerInfo | undefined,
) => DashboardAccess | Promise<DashboardAccess>;

/** What a request may do once past the gate. */
export type Access = "write" | "read";

/** Whether `hostname` is a loopback address: 127.0.0.0/8, ::1, or ::ffff:127.x.y.z. */
export function isLoopbackAddress(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, "").toLowerCase();
  const v4 = host.startsWith("::ffff:") ? host.slice(7) : host;
  if (/^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(v4)) return true;
  return /^(0{0,4}:){2,7}0{0,3}1$/.test(host) || host === "::1";
}

/**
 * The default gate: full access for a TCP connection from a loopback
 * address that also asked for a loopback host, refused otherwise (also when
 * `info` is missing, or for a Unix socket: the address cannot show who is at
 * the other end). The `Host` check stops DNS rebinding: a page of another
 * site whose name now points at 127.0.0.1 still names its own host.
 */
export function loopbackOnly(request: Request, info: Deno.ServeHandlerInfo | undefined): boolean {
  const address = info?.remoteAddr;
  if (address === undefined || address.transport !== "tcp") return false;
  if (!isLoopbackAddress(address.hostname)) return false;
  let host: string;
  try {
    host = new URL(request.url).hostname;
    const header = request.headers.get("host");
    if (header !== null) host = new URL(`http://${header}`).hostname;
  } catch {
    return false;
  }
  return host === "localhost" || isLoopbackAddress(host);
}

/** Runs the gate: the access it grants (at most `"read"` when `readOnly`), or null to refuse. */
export async function askGate(
  gate: DashboardGate,
  readOnly: boolean,
  request: Request,
  info: Deno.ServeHandlerInfo | undefined,
): Promise<Access | null> {
  let answer: unknown;
  try {
    answer = await gate(request, info);
  } catch {
    return null;
  }
  const access = answer === true || answer === "write"
    ? "write"
    : answer === "read"
    ? "read"
    : null;
  return access === "write" && readOnly ? "read" : access;
}
