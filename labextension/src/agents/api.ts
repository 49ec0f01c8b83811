// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * The REST routes of the AI agents (MCP clients) of the current user:
 * credentials, control and sharing, as the server's contract names them
 * (`/tool-terminal/api/agents...`). The models keep the server's snake_case.
 */

import type { ServerConnection } from '@jupyterlab/services';

import { requestAPI } from '../api';

/**
 * What an agent asked for with its `request_control` tool, waiting for the
 * user's answer.
 */
export interface IControlRequest {
  /**
   * Why the agent wants control, in its own words.
   */
  reason: string;

  /**
   * How many minutes it asked for, if it said.
   */
  minutes?: number | null;

  /**
   * When it asked (ISO 8601, UTC): one request, one notification.
   */
  created: string;
}

/**
 * An agent of the current user, as `GET /tool-terminal/api/agents` lists it.
 */
export interface IAgentModel {
  /**
   * The agent id.
   */
  id: string;

  /**
   * The name the user gave it.
   */
  name: string;

  /**
   * When it was created (ISO 8601, UTC).
   */
  created: string;

  /**
   * When its token stops working (ISO 8601, UTC).
   */
  expires: string;

  /**
   * Until when it may type into its terminals (ISO 8601, UTC), or `null`:
   * read-only.
   */
  control_until: string | null;

  /**
   * Its pending request for control, or `null`.
   */
  request: IControlRequest | null;

  /**
   * The ids of the sessions the user shared with it (it may read their
   * screens).
   */
  shared: string[];
}

/**
 * A new agent: the model with its token, which the server sends only once.
 */
export interface INewAgent extends IAgentModel {
  /**
   * The bearer token of the agent, for its MCP client.
   */
  token: string;
}

/**
 * The path of an agent's routes below `tool-terminal/api/`.
 */
function agentPath(id: string, ...rest: string[]): string {
  return ['agents', id, ...rest].map(encodeURIComponent).join('/');
}

/**
 * List the agents of the current user (without tokens).
 *
 * @param serverSettings - The tool terminals' server settings.
 * @returns The agents, in the server's order.
 * @throws {Error} when the answer is not a list.
 */
export async function listAgents(
  serverSettings: ServerConnection.ISettings
): Promise<IAgentModel[]> {
  const data = await requestAPI<unknown>('agents', serverSettings);
  if (!Array.isArray(data)) {
    throw new Error('The server did not answer with a list of agents.');
  }
  return data.filter(isAgent);
}

/**
 * Create an agent: its token is in the answer, and nowhere else ever again.
 *
 * @param name - The agent's name (what notifications and titles show).
 * @param serverSettings - The tool terminals' server settings.
 * @returns The new agent with its token.
 */
export async function createAgent(
  name: string,
  serverSettings: ServerConnection.ISettings
): Promise<INewAgent> {
  const data = await requestAPI<unknown>('agents', serverSettings, {
    method: 'POST',
    body: JSON.stringify({ name })
  });
  if (!isAgent(data) || typeof (data as INewAgent).token !== 'string') {
    throw new Error('The server did not answer with the new agent.');
  }
  return data as INewAgent;
}

/**
 * Delete an agent: its token stops working at once and its terminals end.
 *
 * @param id - The agent id.
 * @param serverSettings - The tool terminals' server settings.
 */
export async function deleteAgent(
  id: string,
  serverSettings: ServerConnection.ISettings
): Promise<void> {
  await requestAPI<unknown>(agentPath(id), serverSettings, {
    method: 'DELETE'
  });
}

/**
 * Give an agent control (it may open terminals and type) for some minutes;
 * this answers its pending request, if any.
 *
 * @param id - The agent id.
 * @param minutes - For how long (the server caps it).
 * @param serverSettings - The tool terminals' server settings.
 * @returns Until when the agent has control (ISO 8601), as the server says.
 */
export async function grantControl(
  id: string,
  minutes: number,
  serverSettings: ServerConnection.ISettings
): Promise<string | null> {
  const data = await requestAPI<{ control_until?: unknown } | null>(
    agentPath(id, 'control'),
    serverSettings,
    { method: 'POST', body: JSON.stringify({ minutes }) }
  );
  const until = data?.control_until;
  return typeof until === 'string' ? until : null;
}

/**
 * End an agent's control at once, or deny its pending request.
 *
 * @param id - The agent id.
 * @param serverSettings - The tool terminals' server settings.
 */
export async function endControl(
  id: string,
  serverSettings: ServerConnection.ISettings
): Promise<void> {
  await requestAPI<unknown>(agentPath(id, 'control'), serverSettings, {
    method: 'DELETE'
  });
}

/**
 * Let an agent read the screen of one of the user's sessions (never type
 * into it).
 *
 * @param id - The agent id.
 * @param session - The session id.
 * @param serverSettings - The tool terminals' server settings.
 */
export async function shareWithAgent(
  id: string,
  session: string,
  serverSettings: ServerConnection.ISettings
): Promise<void> {
  await requestAPI<unknown>(agentPath(id, 'shared'), serverSettings, {
    method: 'POST',
    body: JSON.stringify({ session })
  });
}

/**
 * Stop letting an agent read a session's screen.
 *
 * @param id - The agent id.
 * @param session - The session id.
 * @param serverSettings - The tool terminals' server settings.
 */
export async function stopSharingWithAgent(
  id: string,
  session: string,
  serverSettings: ServerConnection.ISettings
): Promise<void> {
  await requestAPI<unknown>(agentPath(id, 'shared', session), serverSettings, {
    method: 'DELETE'
  });
}

/**
 * Whether a listed item has the fields of an agent model; missing optional
 * fields are not required (`request`, `control_until`, `shared`).
 */
function isAgent(item: unknown): item is IAgentModel {
  if (item === null || typeof item !== 'object' || Array.isArray(item)) {
    return false;
  }
  const value = item as Record<string, unknown>;
  if (typeof value.id !== 'string' || typeof value.name !== 'string') {
    return false;
  }
  // Normalised in place: the rest of the UI reads these without checks.
  value.control_until =
    typeof value.control_until === 'string' ? value.control_until : null;
  value.request = isRequest(value.request) ? value.request : null;
  value.shared = Array.isArray(value.shared)
    ? value.shared.filter(s => typeof s === 'string')
    : [];
  return true;
}

/**
 * Whether a value is a control request as the server records it.
 */
function isRequest(value: unknown): value is IControlRequest {
  if (value === null || typeof value !== 'object') {
    return false;
  }
  const request = value as Record<string, unknown>;
  return (
    typeof request.created === 'string' && typeof request.reason === 'string'
  );
}
