"""elasticity"""
