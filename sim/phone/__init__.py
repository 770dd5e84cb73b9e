"""The simulated phone: a Pillow-rendered Android phone with declarative apps.

``SimPhone(info, seed=0)`` implements sim.phone_api.Phone for the ADB front end, plus a
test-only API (app state, current screen, ground-truth elements). See README.md.
"""

from sim.phone.app import App, Ctx, Screen
from sim.phone.canvas import Element
from sim.phone.phone import ADB_KEYBOARD, GBOARD, PhoneError, SimPhone
from sim.phone.system import Perturbation, SystemSettings

__all__ = ["ADB_KEYBOARD", "GBOARD", "App", "Ctx", "Element", "Perturbation", "PhoneError", "Screen",
           "SimPhone", "SystemSettings"]
