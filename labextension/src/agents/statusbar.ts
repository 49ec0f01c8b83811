// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import { Dialog } from '@jupyterlab/apputils';
import type { TranslationBundle } from '@jupyterlab/translation';
import type { ISignal } from '@lumino/signaling';
import { Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import type { IAgentModel } from './api';
import { endControl } from './api';
import type { AgentsModel } from './model';
import { controlEnd } from './model';
import { button, onClickCall } from './widgets';

/**
 * The class of the control status item.
 */
export const CONTROL_STATUS_CLASS = 'jp-ToolTerminal-agentControl';

/**
 * A status-bar item shown while an agent holds control of the user's tool
 * terminals: the agent's name and the time left, ticking each second;
 * clicking it offers *Revoke control*. It hides itself when control ends
 * (by time, or revoked anywhere).
 */
export class ControlStatus extends Widget {
  /**
   * Construct the item.
   *
   * @param options - The agents model and the translation bundle.
   */
  constructor(options: ControlStatus.IOptions) {
    super();
    this._model = options.model;
    this._trans = options.trans;
    this._now = options.now ?? Date.now;
    this.addClass('jp-StatusBar-TextItem');
    this.addClass(CONTROL_STATUS_CLASS);
    this.node.setAttribute('role', 'button');
    this.node.tabIndex = 0;
    this.node.addEventListener('click', this);
    this.node.addEventListener('keydown', this);
    this._model.changed.connect(this.update, this);
    this.update();
  }

  /**
   * Whether an agent holds control now (the item is shown).
   */
  get isActive(): boolean {
    return this._active;
  }

  /**
   * A signal emitted when the item should be shown or hidden.
   */
  get activeStateChanged(): ISignal<this, void> {
    return this._activeStateChanged;
  }

  /**
   * Show the agent whose control ends first and its time left; start or
   * stop the ticking.
   */
  update(): void {
    if (this.isDisposed) {
      return;
    }
    const now = this._now();
    const agents = this._model.controlling(now);
    const active = agents.length > 0;
    if (active) {
      const first = agents[0];
      const left = formatRemaining(controlEnd(first) - now);
      this.node.textContent =
        agents.length === 1
          ? this._trans.__('Agent %1: %2 left', first.name, left)
          : this._trans.__(
              'Agent %1: %2 left (+%3)',
              first.name,
              left,
              agents.length - 1
            );
      this.node.title = this._trans.__(
        'An agent may type in your tool terminals. Click to revoke its control.'
      );
      if (this._timer === null) {
        this._timer = window.setInterval(() => this.update(), 1000);
      }
    } else {
      this.node.textContent = '';
      this._stopTicking();
    }
    if (active !== this._active) {
      this._active = active;
      this._activeStateChanged.emit();
    }
  }

  /**
   * Handle the DOM events of the item: a click (or Enter/Space) offers to
   * revoke.
   */
  handleEvent(event: Event): void {
    if (
      event.type === 'click' ||
      (event.type === 'keydown' &&
        ['Enter', ' '].includes((event as KeyboardEvent).key))
    ) {
      void this.showRevokeDialog();
    }
  }

  /**
   * The dialog listing the agents in control, each with *Revoke control*;
   * it closes itself once none is left.
   */
  async showRevokeDialog(): Promise<void> {
    const agents = this._model.controlling(this._now());
    if (agents.length === 0) {
      return;
    }
    const body = new Widget();
    body.addClass('jp-ToolTerminal-agentControlDialog');
    const dialog = new Dialog({
      title: this._trans.__('Agents in Control'),
      body,
      buttons: [Dialog.cancelButton({ label: this._trans.__('Close') })]
    });
    let left = agents.length;
    for (const agent of agents) {
      body.node.appendChild(
        this._row(agent, () => {
          left -= 1;
          if (left === 0) {
            dialog.resolve();
          }
        })
      );
    }
    await dialog.launch();
    dialog.dispose();
  }

  /**
   * Dispose of the item and stop ticking.
   */
  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._stopTicking();
    this._model.changed.disconnect(this.update, this);
    super.dispose();
    Signal.clearData(this);
  }

  /**
   * One agent's row of the revoke dialog.
   */
  private _row(agent: IAgentModel, revoked: () => void): HTMLElement {
    const row = document.createElement('div');
    row.className = 'jp-ToolTerminal-agentRow';
    const label = document.createElement('span');
    label.textContent = this._trans.__(
      '%1 (%2 left)',
      agent.name,
      formatRemaining(controlEnd(agent) - this._now())
    );
    const revoke = button(
      this._trans.__('Revoke control'),
      this._trans.__(
        'End the control of %1 now: it is read-only again (its terminals stay open)',
        agent.name
      ),
      'warn'
    );
    onClickCall(
      revoke,
      () => endControl(agent.id, this._model.serverSettings),
      this._trans.__('Could not revoke the control of %1', agent.name),
      () => {
        label.textContent = this._trans.__('%1: control ended', agent.name);
        revoke.remove();
        void this._model
          .refresh()
          .catch(() => undefined)
          .then(revoked);
      }
    );
    row.append(label, revoke);
    return row;
  }

  private _stopTicking(): void {
    if (this._timer !== null) {
      window.clearInterval(this._timer);
      this._timer = null;
    }
  }

  private _model: AgentsModel;
  private _trans: TranslationBundle;
  private _now: () => number;
  private _active = false;
  private _timer: number | null = null;
  private _activeStateChanged = new Signal<this, void>(this);
}

/**
 * The namespace for `ControlStatus` statics.
 */
export namespace ControlStatus {
  /**
   * The options of the item.
   */
  export interface IOptions {
    /**
     * The agents model (the page's one poller).
     */
    model: AgentsModel;

    /**
     * The translation bundle.
     */
    trans: TranslationBundle;

    /**
     * The clock (ms since the epoch; tests set it).
     */
    now?: () => number;
  }
}

/**
 * A duration as a clock shows it: `m:ss`, or `h:mm:ss` from an hour on;
 * rounded up (a second left shows `0:01`, not `0:00`), never negative.
 *
 * @param ms - The duration in milliseconds.
 */
export function formatRemaining(ms: number): string {
  const total = Math.max(0, Math.ceil(ms / 1000));
  const hours = Math.floor(total / 3600);
  const minutes = Math.floor((total % 3600) / 60);
  const seconds = String(total % 60).padStart(2, '0');
  return hours > 0
    ? `${hours}:${String(minutes).padStart(2, '0')}:${seconds}`
    : `${minutes}:${seconds}`;
}
